package ops

// DashboardIDs are the element ids of the dashboard page, for its test.
var DashboardIDs = []string{DashboardStatusID, dashboardUpdatedID, dashboardTokenID,
	dashboardTopicsID, dashboardGroupsID, dashboardInflightID}

// Routes returns the method and path of every route below the prefix.
func Routes(h *Handler) []string { return h.paths }
