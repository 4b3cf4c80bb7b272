// The payment provider's credential as a Key Vault secret: one write, a new version of the secret.
// keyvault.bicep deploys this module only when the deployment is given the key (the first one of
// an environment); it must never run with a stale value, or it would roll a rotated key back.
param vaultName string

param secretName string

@secure()
@minLength(1)
@description('The secret\'s value. Never an output.')
param value string

resource vault 'Microsoft.KeyVault/vaults@2024-11-01' existing = {
  name: vaultName
}

// No expiry: an expired secret would stop every payment (the reference resolves to nothing), a
// systemic failure; rotation is a new version of the same secret (the reference names no version,
// so the app takes the latest: docs/operations.md).
resource secret 'Microsoft.KeyVault/vaults/secrets@2024-11-01' = {
  //checkov:skip=CKV_AZURE_41: no expiry on purpose: an expired provider key stops every payment; the key is rotated as a new version (the reference names none)
  parent: vault
  name: secretName
  properties: {
    value: value
    contentType: 'text/plain'
  }
}
