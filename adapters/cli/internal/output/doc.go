// Package output prints what the CLI's commands answer: JSON shapes of
// their own, mapped field by field from the application's types so that a
// renamed Go field never changes what scripts parse, and records as a
// table, as JSON or as spreadsheet-safe CSV.
package output
