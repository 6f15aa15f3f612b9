// Where the Kubernetes API is: in-cluster service account, or a kubeconfig file.

import { KubeConfig } from '@kubernetes/client-node'

export function loadKubeConfig(file: string | undefined, env: NodeJS.ProcessEnv = process.env): KubeConfig {
  const kubeConfig = new KubeConfig()
  if (file !== undefined) kubeConfig.loadFromFile(file)
  else if (env['KUBERNETES_SERVICE_HOST'] !== undefined && env['KUBECONFIG'] === undefined) kubeConfig.loadFromCluster()
  else kubeConfig.loadFromDefault()
  if (kubeConfig.getCurrentCluster() === null) {
    throw new Error('no Kubernetes cluster configured: pass --kubeconfig, set KUBECONFIG, or run in a cluster')
  }
  return kubeConfig
}
