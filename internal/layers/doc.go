// Package layers holds no code: its tests hold the package graph of the
// module and of the lab (tools/) to the design card's folders and the
// layer rules of CONTRIBUTING.md, and the importable packages to the
// public surface the README lists, which hands out no internal type.
package layers
