package redisinventory

import (
	"embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// luaFiles holds every script and fragment of the package.
//
//go:embed *.lua
var luaFiles embed.FS

// fragment names a Lua file that only defines local functions, for the
// scripts it is prepended to.
type fragment string

const (
	// nodeLua defines node_run and fence_holds, with which every script
	// that writes or checks a SKU's fence compares it (see the package
	// doc, "Fencing").
	nodeLua fragment = "node.lua"
	// entryLua defines entry, the stream entry format of the scripts that
	// append events.
	entryLua fragment = "entry.lua"
	// receiptLua defines read_receipt and write_receipt, the receipt format.
	receiptLua fragment = "receipt.lua"
	// recordsLua defines records_of and count_records: where a SKU keeps
	// its receipts and its buyers' counts, by its layout; and
	// start_one_hash, the fields a one-hash SKU starts with.
	recordsLua fragment = "records.lua"
	// purchaseLua defines live_sku and free_allowance, the checks and the
	// allowance bookkeeping that release and the hold scripts share. It
	// calls fence_holds (nodeLua) and sku_fault (skuStateLua).
	purchaseLua fragment = "purchase.lua"
	// holdLua defines the hold record format, Redis's clock and the reply
	// every hold script gives about a hold.
	holdLua fragment = "hold.lua"
	// seqGuardLua defines guard_seq, shared by the compare-and-set scripts.
	seqGuardLua fragment = "seqguard.lua"
	// skuStateLua defines sku_fault, what every script that reads a SKU's
	// live fields to sell, hold, show, adjust or close it calls a state
	// that does not read.
	skuStateLua fragment = "skustate.lua"
)

// The scripts: each is its file with its fragments prepended, in the order
// given, so a fragment may call the ones before it. This table is the one
// place a script is put together; Load preloads every script in it. Each
// runs by EVALSHA and falls back to EVAL only on NOSCRIPT, so the hot path
// sends the 40-byte digest, not the body.
var (
	warmScript     = newScript("warm.lua", nodeLua, entryLua, recordsLua)
	batchScript    = newScript("batch.lua", nodeLua, skuStateLua, entryLua, receiptLua, recordsLua, holdLua)
	releaseScript  = newScript("release.lua", nodeLua, skuStateLua, entryLua, receiptLua, recordsLua, purchaseLua, holdLua)
	adjustScript   = newScript("adjust.lua", nodeLua, skuStateLua, entryLua)
	stateScript    = newScript("state.lua", nodeLua, skuStateLua)
	holdEndScript  = newScript("hold_end.lua", nodeLua, skuStateLua, entryLua, receiptLua, recordsLua, purchaseLua, holdLua)
	holdShowScript = newScript("hold_show.lua", recordsLua, holdLua)
	dueScript      = newScript("due.lua", holdLua)

	closeScript      = newScript("close.lua", nodeLua, skuStateLua, entryLua)
	dropBuyersScript = newScript("drop_buyers.lua", recordsLua)
	retireScript     = newScript("retire.lua", nodeLua, recordsLua)

	stampScript   = newScript("stamp.lua", nodeLua, seqGuardLua)
	fenceScript   = newScript("fence.lua", seqGuardLua)
	correctScript = newScript("correct.lua", nodeLua, seqGuardLua)

	restoreBeginScript  = newScript("restore_begin.lua", recordsLua)
	quarantineScript    = newScript("quarantine.lua")
	restoreChunkScript  = newScript("restore_chunk.lua", recordsLua)
	restoreFinishScript = newScript("restore_finish.lua", nodeLua, recordsLua)
	entombScript        = newScript("entomb.lua")

	recordProbeScript  = newScript("record_probe.lua", receiptLua, recordsLua, holdLua)
	recordRepairScript = newScript("record_repair.lua", nodeLua, recordsLua)
)

// luaScript is one script of the table.
type luaScript struct {
	*redis.Script
	file      string
	fragments []fragment
}

// scripts lists the table's scripts in its order; newScript adds each.
var scripts []*luaScript

func newScript(file string, fragments ...fragment) *luaScript {
	var body strings.Builder
	for _, f := range fragments {
		body.WriteString(luaFile(string(f)))
	}
	body.WriteString(luaFile(file))
	s := &luaScript{Script: redis.NewScript(body.String()), file: file, fragments: fragments}
	scripts = append(scripts, s)
	return s
}

// luaFile returns an embedded file; a name the table misspells stops the
// program at start, before any script runs.
func luaFile(name string) string {
	b, err := luaFiles.ReadFile(name)
	if err != nil {
		panic("redisinventory: " + err.Error())
	}
	return string(b)
}
