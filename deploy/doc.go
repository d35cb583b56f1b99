// Package deploy holds the Kubernetes chart (chart/invledger) and the
// compose file (compose.yaml), and the tests that render, decode and check
// them. It is a module of its own so that helm and the Kubernetes API
// types never enter the main module's build.
package deploy
