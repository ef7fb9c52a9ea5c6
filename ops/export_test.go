package ops

// DashboardIDs are the element ids of the dashboard page, for its test.
var DashboardIDs = []string{DashboardStatusID, dashboardUpdatedID, dashboardTokenID,
	dashboardTopicsID, dashboardGroupsID, dashboardInflightID}
