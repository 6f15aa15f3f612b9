// The `servicecidr-guard` command and its subcommands, and runCli, which runs one command line
// with the I/O it is given and answers its exit code.

import { Command, CommanderError } from 'commander'
import { auditCommand } from './audit.ts'
import { checkCommand } from './check.ts'
import { exitCodes } from './errors.ts'
import { generateCommand } from './generate.ts'
import type { CommandContext, CommandIO } from './io.ts'
import { planCommand } from './plan.ts'
import { serveCommand } from './serve.ts'

export function buildProgram(version: string, context: CommandContext): Command {
  const program = new Command('servicecidr-guard')
    .description('Govern Kubernetes ServiceCIDR ranges: an admission webhook, and the same policy engine for offline checks.')
    .version(version)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({ writeOut: context.io.stdout, writeErr: context.io.stderr })
  for (const command of [serveCommand(), checkCommand(context), auditCommand(context), planCommand(context), generateCommand(context)]) {
    program.addCommand(inherit(command, program))
  }
  return program
}

/**
 * addCommand, unlike command(), does not pass the parent's settings on: without them a subcommand's
 * usage error would call process.exit itself, and print help to the real stderr. Subcommands of
 * subcommands (generate vap) need them too.
 */
function inherit(command: Command, parent: Command): Command {
  command.copyInheritedSettings(parent)
  for (const sub of command.commands) inherit(sub, command)
  return command
}

/** Runs one command line (without node and script) and answers its exit code. Never throws. */
export async function runCli(args: readonly string[], io: CommandIO, version: string): Promise<number> {
  const context: CommandContext = { io, exitCode: exitCodes.ok }
  try {
    await buildProgram(version, context).parseAsync(args, { from: 'user' })
    return context.exitCode
  } catch (error) {
    // Commander has printed its own message; --help and --version end here too, with exit code 0.
    if (error instanceof CommanderError) return error.exitCode === 0 ? exitCodes.ok : exitCodes.usage
    // Usage, policy, input and cluster access errors: one message, never a stack trace.
    io.stderr(`servicecidr-guard: ${error instanceof Error ? error.message : String(error)}\n`)
    return exitCodes.usage
  }
}
