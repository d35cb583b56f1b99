package bench

import (
	"testing"

	"github.com/invledger/invledger/adapters/localstack/localstacktest"
)

func TestMain(m *testing.M) { localstacktest.Main(m) }
