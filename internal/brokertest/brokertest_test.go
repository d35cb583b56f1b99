package brokertest_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/invledger/invledger/internal/brokertest"
)

// TestRabbitMQStartsAndStopsPrivately starts a node, publishes through
// it, and checks that its epmd and node are gone once the test's cleanup ran.
func TestRabbitMQStartsAndStopsPrivately(t *testing.T) {
	var pids []int
	t.Run("node", func(t *testing.T) {
		r := brokertest.StartRabbitMQ(t, brokertest.RabbitMQConfig{})
		c, err := amqp.Dial(r.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.QueueDeclare("q", false, true, false, false, nil); err != nil {
			t.Fatal(err)
		}
		t.Logf("started at %s", time.Now().Format("15:04:05.000"))
		pids = ownChildren(t)
		if len(pids) < 2 {
			t.Fatalf("the node and its epmd should run as children of the test, found %v", pids)
		}
	})
	for _, pid := range pids {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); !strings.Contains(string(b), ") Z ") {
				t.Errorf("process %d outlived the test", pid)
			}
		}
	}
}

// ownChildren lists this process's children.
func ownChildren(t *testing.T) []int {
	t.Helper()
	ents, _ := filepath.Glob("/proc/[0-9]*/stat")
	me := strconv.Itoa(os.Getpid())
	var out []int
	for _, e := range ents {
		b, err := os.ReadFile(e)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if f := strings.Fields(s[i+2:]); len(f) > 1 && f[1] == me {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(e)))
			out = append(out, pid)
		}
	}
	return out
}
