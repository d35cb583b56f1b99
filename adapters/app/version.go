package app

import (
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// version is stamped at link time by `make build`:
// -ldflags "-X github.com/invledger/invledger/adapters/app.version=$(git describe --always --dirty)".
var version string

// Version is this binary's version: the one `make build` stamped, else the
// main module's version from the build info (go build stamps it from the
// VCS, e.g. v0.0.0-20261130…-abcdef+dirty), else the VCS revision, else
// "(devel)".
func Version() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	if rev, modified := vcs(bi); rev != "" {
		if modified {
			rev += "-dirty"
		}
		return rev
	}
	return "(devel)"
}

// VersionDetail is Version with the commit, whether the working tree was
// modified, and the Go version, as --version prints it.
func VersionDetail() string {
	parts := []string{runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if rev, modified := vcs(bi); rev != "" {
			if modified {
				rev += ", modified"
			}
			parts = append([]string{"commit " + rev}, parts...)
		}
	}
	return Version() + " (" + strings.Join(parts, ", ") + ")"
}

// vcs returns the revision and modified flag the go command stamped.
func vcs(bi *debug.BuildInfo) (revision string, modified bool) {
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return revision, modified
}

// newBuildInfoCollector is go_build_info as client_golang's build-info
// collector exports it, with Version as its version label, so a stamped
// binary shows the version it was stamped with.
func newBuildInfoCollector() prometheus.Collector {
	path, sum := "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		path, sum = bi.Main.Path, bi.Main.Sum
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "go_build_info",
		Help:        "Build information about the main Go module.",
		ConstLabels: prometheus.Labels{"path": path, "version": Version(), "checksum": sum},
	}, func() float64 { return 1 })
}
