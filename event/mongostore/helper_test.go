package mongostore_test

const helperEnv = "MONGOSTORE_TEST_HELPER"

func runHelper(mode string) int { return 2 }
