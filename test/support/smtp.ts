// A real SMTP server on loopback (smtp-server), for the alert mails: it takes the login the
// SMTP_URL gives, keeps every mail it accepts, and can be told to refuse for a while.
import type { AddressInfo } from "node:net"
import { SMTPServer } from "smtp-server"

export type ReceivedMail = { readonly from: string; readonly to: ReadonlyArray<string>; readonly raw: string; readonly subject: string }

export type SmtpServer = {
  readonly url: string
  readonly port: number
  readonly mails: ReadonlyArray<ReceivedMail>
  /** Answer 451 (try again later) to the next `n` mails. */
  refuse(n: number): void
  close(): Promise<void>
}

export const USER = "alerts"
export const PASSWORD = "s3cret-pass"

export const startSmtpServer = async (port = 0): Promise<SmtpServer> => {
  const mails: Array<ReceivedMail> = []
  let refusing = 0
  const server = new SMTPServer({
    secure: false,
    disabledCommands: ["STARTTLS"],
    allowInsecureAuth: true,
    authMethods: ["PLAIN", "LOGIN"],
    logger: false,
    onAuth: (auth, _session, done) =>
      auth.username === USER && auth.password === PASSWORD ? done(null, { user: USER }) : done(new Error("bad login")),
    onData: (stream, session, done) => {
      const chunks: Array<Buffer> = []
      stream.on("data", (c: Buffer) => chunks.push(c))
      stream.on("end", () => {
        if (refusing > 0) {
          refusing--
          return done(Object.assign(new Error("try again later"), { responseCode: 451 }))
        }
        const raw = Buffer.concat(chunks).toString("utf8")
        const subject = /^Subject: (.*)$/m.exec(raw)?.[1]?.trim() ?? ""
        mails.push({
          from: session.envelope.mailFrom === false ? "" : session.envelope.mailFrom.address,
          to: session.envelope.rcptTo.map((r) => r.address),
          raw,
          subject
        })
        done()
      })
    }
  })
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve))
  const bound = (server.server.address() as AddressInfo).port
  return {
    url: `smtp://${USER}:${PASSWORD}@127.0.0.1:${bound}`,
    port: bound,
    mails,
    refuse: (n) => {
      refusing = n
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
