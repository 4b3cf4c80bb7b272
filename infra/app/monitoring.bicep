// Log Analytics workspace + workspace-based Application Insights.
// Local (instrumentation-key) ingestion is disabled: the app publishes telemetry with its managed
// identity (APPLICATIONINSIGHTS_AUTHENTICATION_STRING) and needs Monitoring Metrics Publisher (rbac.bicep).
param logAnalyticsName string
param applicationInsightsName string
param location string
param tags object = {}

@minValue(30)
@maxValue(730)
param retentionInDays int = 30

@description('Daily ingestion cap of the workspace in GB; -1 = no cap. When the cap is reached the workspace stops collecting until the next reset, and the log-based alerts go blind with it (Learn: Set daily cap on Log Analytics workspace). Size it from docs/capacity.md.')
@minValue(-1)
param dailyQuotaGb int = -1

resource logAnalytics 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: logAnalyticsName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: retentionInDays
    workspaceCapping: {
      dailyQuotaGb: dailyQuotaGb
    }
    features: {
      disableLocalAuth: true
    }
  }
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: applicationInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: logAnalytics.id
    DisableLocalAuth: true
    IngestionMode: 'LogAnalytics'
  }
}

output applicationInsightsId string = applicationInsights.id
output applicationInsightsName string = applicationInsights.name
output connectionString string = applicationInsights.properties.ConnectionString
output logAnalyticsId string = logAnalytics.id
output logAnalyticsName string = logAnalytics.name
