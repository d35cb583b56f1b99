package domain

import "time"

// OperationAction names a state-changing operation on a SKU, as the
// operations audit trail records it.
type OperationAction string

// The recorded actions.
const (
	ActionCreate  OperationAction = "create"
	ActionWarm    OperationAction = "warm"
	ActionClose   OperationAction = "close"
	ActionArchive OperationAction = "archive"
	ActionRestore OperationAction = "restore"
	ActionRepair  OperationAction = "repair"
	ActionRebuild OperationAction = "rebuild"
	ActionRetire  OperationAction = "retire"
)

// Operation is one entry of the operations audit trail: who did what to
// which SKU, and when. Actor is a principal name (an HTTP token's name),
// "system:<component>" for the service's own components, or "cli:<os
// user>" for a CLI run.
type Operation struct {
	ID     int64
	SKU    string
	Action OperationAction
	Actor  string
	At     time.Time
	Detail string
}
