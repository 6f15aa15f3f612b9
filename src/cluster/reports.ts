// Writing a ClusterPolicyReport (wgpolicyk8s.io/v1alpha2) to the cluster, for `audit --apply`: one
// server-side apply, so that the report is created or replaced whole, and the command needs no kubectl
// (the image has none) and no read access to reports.

import { CustomObjectsApi, Observable, type ConfigurationOptions, type KubeConfig } from '@kubernetes/client-node'

export const reportGroup = 'wgpolicyk8s.io'
export const reportVersion = 'v1alpha2'
/** The field manager of the apply: what owns the report's fields. */
export const fieldManager = 'servicecidr-guard'

/**
 * Server-side applies the report (PATCH, application/apply-patch+yaml, force): created if absent,
 * and every field this manager set is replaced, so results that no longer hold disappear. Needs RBAC
 * `patch` on clusterpolicyreports, and `create` for the first one.
 */
export async function applyClusterPolicyReport(kubeConfig: KubeConfig, report: { metadata: { name: string } }, signal?: AbortSignal): Promise<void> {
  const options: ConfigurationOptions = {
    middleware: [{
      pre: (context) => {
        // The generated client sends a JSON patch by default; JSON is YAML, as apply-patch+yaml reads it.
        context.setHeaderParam('Content-Type', 'application/apply-patch+yaml')
        if (signal !== undefined) context.setSignal(signal)
        return new Observable(Promise.resolve(context))
      },
      post: (response) => new Observable(Promise.resolve(response)),
    }],
    middlewareMergeStrategy: 'append',
  }
  await kubeConfig.makeApiClient(CustomObjectsApi).patchClusterCustomObject({
    group: reportGroup,
    version: reportVersion,
    plural: 'clusterpolicyreports',
    name: report.metadata.name,
    body: report,
    fieldManager,
    force: true,
  }, options)
}
