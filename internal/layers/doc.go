// Package layers holds no code: its tests hold the module's package graph to
// the layer rules of CONTRIBUTING.md and its importable packages to the
// public surface the README lists, with `go list` over the module.
package layers
