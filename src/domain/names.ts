// Names people give keys, tokens and endpoints are shown back in terminals, tables and
// pages: a control character (a newline, an escape that recolours a terminal) or a
// bidirectional override (which reorders what follows it) would garble or disguise them.

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/u

/** The first character a name may not hold, as U+XXXX; undefined when there is none. */
export const forbiddenInName = (name: string): string | undefined => {
  const m = CONTROL.exec(name)
  return m === null ? undefined : `U+${m[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`
}

export const FORBIDDEN_IN_NAME = "control characters (such as a newline, a tab or an escape) or bidirectional overrides"
