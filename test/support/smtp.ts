// A real SMTP server on loopback (smtp-server), for the alert mails: it takes the login the
// SMTP_URL gives, keeps every mail it accepts, and can be told to refuse for a while.
import type { AddressInfo } from "node:net"
import { SMTPServer } from "smtp-server"

export type ReceivedMail = {
  readonly from: string
  readonly to: ReadonlyArray<string>
  readonly raw: string
  readonly subject: string
  /** The text body, decoded. */
  readonly text: string
}

// Enough of MIME to read what nodemailer writes: folded headers, RFC 2047 encoded words, and a
// text body in 7bit, quoted-printable or base64.
const decodeWords = (value: string) =>
  value
    .replace(/\?=\s+=\?/g, "?==?")
    .replace(/=\?([^?]+)\?([QB])\?([^?]*)\?=/gi, (_m, _charset: string, enc: string, text: string) =>
      enc.toUpperCase() === "B"
        ? Buffer.from(text, "base64").toString("utf8")
        : Buffer.from(
            text
              .replace(/_/g, " ")
              .replace(/=([0-9A-F]{2})/gi, (_x, h: string) => String.fromCharCode(Number.parseInt(h, 16))),
            "latin1"
          ).toString("utf8")
    )

const parse = (raw: string): { subject: string; text: string } => {
  const split = raw.indexOf("\r\n\r\n")
  const head = raw.slice(0, split).replace(/\r\n[ \t]+/g, " ")
  const body = raw.slice(split + 4)
  const header = (name: string) => new RegExp(`^${name}: (.*)$`, "mi").exec(head)?.[1]?.trim() ?? ""
  const enc = header("Content-Transfer-Encoding").toLowerCase()
  const text =
    enc === "base64"
      ? Buffer.from(body, "base64").toString("utf8")
      : enc === "quoted-printable"
        ? Buffer.from(
            body
              .replace(/=\r\n/g, "")
              .replace(/=([0-9A-F]{2})/gi, (_x, h: string) => String.fromCharCode(Number.parseInt(h, 16))),
            "latin1"
          ).toString("utf8")
        : body
  return { subject: decodeWords(header("Subject")), text: text.replace(/\r\n/g, "\n") }
}

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
        mails.push({
          from: session.envelope.mailFrom === false ? "" : session.envelope.mailFrom.address,
          to: session.envelope.rcptTo.map((r) => r.address),
          raw,
          ...parse(raw)
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
