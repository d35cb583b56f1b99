package bench

import (
	"testing"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
)

func TestMain(m *testing.M) { localstacktest.Main(m) }
