// AdmissionReview bodies as kube-apiserver sends them for a ServiceCIDR.

export interface ReviewExtra {
  readonly uid?: string
  readonly oldCIDRs?: readonly string[]
  readonly dryRun?: boolean
  readonly userInfo?: { readonly username: string, readonly groups: readonly string[] }
}

export function admissionReview(operation: 'CREATE' | 'UPDATE' | 'DELETE', name: string, cidrs: readonly string[], extra: ReviewExtra = {}): Record<string, unknown> {
  const object = (list: readonly string[]): Record<string, unknown> => ({ apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name }, spec: { cidrs: list } })
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: extra.uid ?? `uid-${name}`,
      kind: { group: 'networking.k8s.io', version: 'v1', kind: 'ServiceCIDR' },
      resource: { group: 'networking.k8s.io', version: 'v1', resource: 'servicecidrs' },
      name,
      operation,
      userInfo: extra.userInfo ?? { username: 'alice', groups: ['system:authenticated'] },
      object: operation === 'DELETE' ? null : object(cidrs),
      oldObject: operation === 'DELETE' ? object(cidrs) : operation === 'UPDATE' ? object(extra.oldCIDRs ?? cidrs) : null,
      dryRun: extra.dryRun ?? false,
    },
  }
}
