// HTML built with a tagged template that escapes every interpolated value unless it is
// already Html (made by this tag or by `raw`, which only this module's callers use on
// constant text). Pure.

export class Html {
  readonly value: string
  constructor(value: string) {
    this.value = value
  }
  toString(): string {
    return this.value
  }
}

const ESCAPES: Readonly<Record<string, string>> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
  "`": "&#96;"
}

/** Text made safe for element content and for quoted attribute values. */
export const escapeHtml = (text: string): string => text.replace(/[&<>"'`]/g, (c) => ESCAPES[c]!)

/** Interpolations: Html as is, arrays item by item, null/undefined/false/true as nothing, the rest escaped. */
export type Interpolation = Html | string | number | bigint | boolean | null | undefined | ReadonlyArray<Interpolation>

const render = (v: Interpolation): string => {
  if (v instanceof Html) return v.value
  if (v === null || v === undefined || typeof v === "boolean") return ""
  if (Array.isArray(v)) return v.map(render).join("")
  return escapeHtml(String(v))
}

export const html = (strings: TemplateStringsArray, ...values: ReadonlyArray<Interpolation>): Html => {
  let out = strings[0]!
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + strings[i + 1]!
  return new Html(out)
}

/** Trusted markup as is: constant text only, never anything from a request or the database. */
export const raw = (markup: string): Html => new Html(markup)

/** An attribute that is present or not: attr("checked", on). */
export const attr = (name: string, on: boolean): Html => (on ? new Html(` ${name}`) : new Html(""))
