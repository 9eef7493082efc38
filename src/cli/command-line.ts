/** The command a `gateway` command line names, and its arguments: `serve` when none is named or it starts with a flag. */
export const commandLine = (argv: ReadonlyArray<string>): { readonly command: string; readonly rest: ReadonlyArray<string> } => {
  const first = argv[0]
  if (first === undefined) return { command: "serve", rest: [] }
  if (first.startsWith("-") && first !== "-h" && first !== "--help") return { command: "serve", rest: argv }
  return { command: first, rest: argv.slice(1) }
}
