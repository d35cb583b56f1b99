package natsexport_test

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs more tests at once than the machine has cores (-parallel's
// default): this package's tests wait on private brokers, restarts and
// pings, not on the CPU. An explicit -parallel is kept.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "8")
	}
	os.Exit(m.Run())
}
