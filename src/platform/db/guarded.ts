// A connection's handle whose statements first pass a check: a transaction's handle refuses
// statements once the transaction has ended (Sql.ts) or once its COMMIT has gone (pipelined.ts),
// so that work left behind fails instead of running outside the transaction.

/** `conn` with its statements (tagged calls, `unsafe`, `file`) checked first; `check` throws to refuse one. */
export const guarded = <T extends object>(conn: T, check: () => void): T =>
  new Proxy(conn, {
    apply: (target, self, args) => {
      check()
      return Reflect.apply(target as unknown as (...a: unknown[]) => unknown, self, args)
    },
    get: (target, key) => {
      const value = Reflect.get(target, key, target)
      if (key !== "unsafe" && key !== "file") return value
      return (...args: unknown[]) => {
        check()
        return Reflect.apply(value as (...a: unknown[]) => unknown, target, args)
      }
    }
  })
