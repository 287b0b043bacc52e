// A receiver's origin (host[:port] of its https URL): the engine queues and limits sends per
// origin, and delivery rows store it. The same rule in SQL (over stored, normalised URLs) and
// in code.

/** host[:port] of a stored (normalised, https-only) URL. */
export const originOf = (column: string) => `substring(${column} from '^https://([^/?#]+)')`

const ORIGIN = /^https:\/\/([^/?#]+)/

/** host[:port] of an https URL, as `originOf` computes it in SQL; the URL itself when it is not one. */
export const urlOrigin = (url: string): string => ORIGIN.exec(url)?.[1] ?? url
