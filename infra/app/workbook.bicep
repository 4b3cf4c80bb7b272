// The operators' workbook, attached to Application Insights. Its panels are in
// ../monitoring/workbook.json (the workbook's serialized form, as the portal's Advanced Editor
// shows it); tests/telemetry/test_envelopes.py checks every name its queries read against what the
// exporter really sends.
param location string
param tags object = {}
param applicationInsightsName string

@description('Display name of the workbook in the portal.')
param displayName string = 'Orders consumer: operations'

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

resource workbook 'Microsoft.Insights/workbooks@2023-06-01' = {
  // A workbook's name must be a GUID: derived, so redeployments update the same workbook.
  name: guid(applicationInsights.id, 'orders-operations-workbook')
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: displayName
    category: 'workbook'
    sourceId: applicationInsights.id
    serializedData: loadTextContent('../monitoring/workbook.json')
    version: 'Notebook/1.0'
  }
}

output id string = workbook.id
