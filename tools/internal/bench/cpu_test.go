package bench

import (
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// A command name with a space and a parenthesis, as /proc shows it.
	stat := "4242 (redis-server (x) *) S 1 4242 4242 0 -1 4194560 1096 0 0 0 150 250 7 3 20 0 5 0 1234 0 0\n"
	f := parseProcStat(stat)
	if len(f) < 15 || f[0] != "S" || f[1] != "1" {
		t.Fatalf("fields = %q, want the state S and the parent pid 1 first", f)
	}
	if got, want := statCPU(f, false), 400*clockTick; got != want {
		t.Errorf("utime+stime = %s, want %s", got, want)
	}
	if got, want := statCPU(f, true), 410*clockTick; got != want {
		t.Errorf("with children = %s, want %s", got, want)
	}
	if parseProcStat("garbage") != nil {
		t.Error("a stat without a command name parsed")
	}
	if statCPU([]string{"S", "1"}, true) != 0 {
		t.Error("too few fields gave CPU time")
	}
}

func TestRedisProcessID(t *testing.T) {
	info := "# Server\r\nredis_version:7.2.4\r\nprocess_id:31337\r\nrun_id:abc\r\n"
	if got := redisProcessID(info); got != 31337 {
		t.Errorf("process_id = %d, want 31337", got)
	}
	if got := redisProcessID("# Server\r\n"); got != 0 {
		t.Errorf("no process_id gave %d", got)
	}
}

func TestCPUCores(t *testing.T) {
	at := time.Unix(100, 0)
	a := cpuSample{at: at, self: time.Second, children: 0, redis: 2 * time.Second, postgres: time.Second}
	b := cpuSample{at: at.Add(2 * time.Second), self: 3 * time.Second, children: time.Second, redis: 3 * time.Second, postgres: 2 * time.Second}
	s := &cpuSampler{}
	if got, want := *s.cores(a, b, false), (CPUCores{Bench: 1, Redis: 0.5, Postgres: 0.5}); got != want {
		t.Errorf("cores = %+v, want %+v", got, want)
	}
	if got := s.cores(a, b, true).Bench; got != 0.5 {
		t.Errorf("raw bench cores = %g, want redis-benchmark's (the exited child's) 0.5", got)
	}
	if s.cores(b, a, false) != nil {
		t.Error("samples out of order gave cores")
	}
}
