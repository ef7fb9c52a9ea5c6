// Package mongostore is an event store in MongoDB.
package mongostore
