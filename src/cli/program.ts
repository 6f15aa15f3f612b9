// The `servicecidr-guard` command and its subcommands.

import { Command } from 'commander'
import { serveCommand } from './serve.ts'

export function buildProgram(version: string): Command {
  return new Command('servicecidr-guard')
    .description('Govern Kubernetes ServiceCIDR ranges: an admission webhook, and the same policy engine for offline checks.')
    .version(version)
    .showHelpAfterError()
    .addCommand(serveCommand())
}
