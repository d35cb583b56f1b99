package bench

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// CPUCores is how many cores each process used on average during a run:
// CPU time divided by wall time. On a 2-core machine they add up to at most 2.
type CPUCores struct {
	// Bench is this process: the load generator, and for lib and http
	// the service and its projector too. For the raw ceiling it is
	// redis-benchmark.
	Bench    float64 `json:"bench"`
	Redis    float64 `json:"redis"`
	Postgres float64 `json:"postgres"`
}

// cpuSampler reads CPU time from /proc for the private stack's servers.
// It is best effort: where /proc is missing the figures stay 0.
// A selfOnly sampler (a single run's, whose servers may be anywhere)
// measures this process alone, for its CPU per purchase.
type cpuSampler struct {
	redisPID, postgresPID int
	selfOnly              bool
}

type cpuSample struct {
	at                              time.Time
	self, children, redis, postgres time.Duration
}

// newCPUSampler finds the servers' pids: Redis tells its own, and the
// postmaster is the parent of our backend.
// Being best effort, it leaves a pid 0 where it cannot learn it.
func newCPUSampler(ctx context.Context, rdb redis.UniversalClient, pg *pgx.Conn) *cpuSampler {
	s := &cpuSampler{}
	if info, err := rdb.Info(ctx, "server").Result(); err == nil {
		s.redisPID = redisProcessID(info)
	}
	var backend int
	if err := pg.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err == nil {
		if f := procStatFields(backend); len(f) > 2 {
			s.postgresPID, _ = strconv.Atoi(f[1])
		}
	}
	return s
}

// redisProcessID reads process_id from the text of INFO server; 0 if absent.
func redisProcessID(info string) int {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, _ := strconv.Atoi(v) // best effort: 0 samples nothing
			return pid
		}
	}
	return 0
}

func (s *cpuSampler) sample() cpuSample {
	out := cpuSample{at: time.Now()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		out.self = rusageTime(ru)
	}
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) == nil {
		out.children = rusageTime(ru) // exited children: redis-benchmark
	}
	if s.redisPID > 0 {
		out.redis = procCPU(s.redisPID, false)
	}
	if s.postgresPID > 0 {
		// The postmaster, its live children, and (in its cutime) the
		// children it already reaped.
		out.postgres = procCPU(s.postgresPID, true)
		for _, pid := range procChildren(s.postgresPID) {
			out.postgres += procCPU(pid, false)
		}
	}
	return out
}

// cores turns two samples into average cores used. For the raw ceiling
// the bench figure is redis-benchmark's (a child that exited in between).
// A selfOnly sampler gives none.
func (s *cpuSampler) cores(a, b cpuSample, raw bool) *CPUCores {
	wall := b.at.Sub(a.at).Seconds()
	if s == nil || s.selfOnly || wall <= 0 {
		return nil
	}
	bench := b.self - a.self
	if raw {
		bench = b.children - a.children
	}
	return &CPUCores{Bench: bench.Seconds() / wall, Redis: (b.redis - a.redis).Seconds() / wall, Postgres: (b.postgres - a.postgres).Seconds() / wall}
}

// redisUsecPer is redis-server's CPU time between two samples, in
// microseconds per one of n; 0 when n is 0.
func redisUsecPer(a, b cpuSample, n int64) float64 {
	return usecPer(b.redis-a.redis, n)
}

// usecPer is d in microseconds per one of n; 0 when n is 0.
func usecPer(d time.Duration, n int64) float64 {
	if n <= 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(n)
}

func rusageTime(ru syscall.Rusage) time.Duration {
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTick is Linux's USER_HZ, the unit of /proc/<pid>/stat times.
const clockTick = 10 * time.Millisecond

// procStatFields returns /proc/<pid>/stat's fields after the command name
// (so index 0 is field 3, the state).
func procStatFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	return parseProcStat(string(b))
}

// parseProcStat splits the text of /proc/<pid>/stat after the command name,
// which is in parentheses and may itself hold spaces and parentheses.
func parseProcStat(stat string) []string {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(stat[i+1:])
}

// procCPU is utime+stime of pid, plus cutime+cstime if withChildren.
func procCPU(pid int, withChildren bool) time.Duration {
	return statCPU(procStatFields(pid), withChildren)
}

// statCPU is the CPU time in parseProcStat's fields f: utime+stime, plus
// cutime+cstime if withChildren; 0 for too few fields.
func statCPU(f []string, withChildren bool) time.Duration {
	if len(f) < 15 {
		return 0
	}
	ticks := int64(0)
	fields := []int{11, 12} // utime, stime (fields 14 and 15)
	if withChildren {
		fields = append(fields, 13, 14) // cutime, cstime
	}
	for _, i := range fields {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * clockTick
}

func procChildren(parent int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	want := strconv.Itoa(parent)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := procStatFields(pid); len(f) > 1 && f[1] == want {
			out = append(out, pid)
		}
	}
	return out
}
