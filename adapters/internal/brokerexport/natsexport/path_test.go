package natsexport

import "testing"

// TestChoosePath: a stream of one replica takes the pipeline on any
// server; a replicated one atomic batches where they are taken, else one
// publish at a time per SKU; a path set is taken only where it can run.
func TestChoosePath(t *testing.T) {
	for _, c := range []struct {
		want      string
		canAtomic bool
		replicas  int
		path      string
	}{
		{"", false, 1, pathPipeline},
		{"", true, 1, pathPipeline},
		{"", false, 0, pathPipeline}, // a config read back without replicas: one
		{"", true, 3, pathAtomic},
		{"", false, 3, pathPerSKU},
		{pathAtomic, true, 1, pathAtomic},
		{pathAtomic, false, 1, pathPipeline},
		{pathAtomic, false, 3, pathPerSKU},
		{pathPipeline, true, 3, pathAtomic},
		{pathPipeline, false, 3, pathPerSKU},
		{pathPerSKU, true, 1, pathPerSKU},
	} {
		if got, why := choosePath(c.want, c.canAtomic, c.replicas); got != c.path || why == "" {
			t.Errorf("choosePath(%q, atomic %v, %d replicas) = %s (%q), want %s", c.want, c.canAtomic, c.replicas, got, why, c.path)
		}
	}
	for _, atomic := range []string{"2.12.1", "2.15.3", "3.0.0", "2.13.0-beta.1"} {
		if !atomicServer(atomic) {
			t.Errorf("atomicServer(%q) = false", atomic)
		}
	}
	for _, old := range []string{"2.9.10", "2.12.0", "2.11.9", "", "x"} {
		if atomicServer(old) {
			t.Errorf("atomicServer(%q) = true", old)
		}
	}
}
