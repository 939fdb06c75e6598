package bridge

import (
	"fmt"
	"testing"

	"github.com/smartgo/smartgo/client/admin"
)

// A page never splits the entries of one key (an AMQP queue of the same
// name in two virtual hosts): the next page, after that key, would lose
// the rest.
func TestPageKeepsOneKeyTogether(t *testing.T) {
	items := []string{"a", "b", "b", "b", "c", "d"}
	id := func(s string) string { return s }
	keep, total, next := page(items, id, admin.MQTTQuery{Limit: 2})
	if fmt.Sprint(keep) != "[a b b b]" || total != 6 || next != "b" {
		t.Fatalf("first page %v total %d next %q", keep, total, next)
	}
	keep, _, next = page(items, id, admin.MQTTQuery{After: next, Limit: 2})
	if fmt.Sprint(keep) != "[c d]" || next != "" {
		t.Fatalf("second page %v next %q", keep, next)
	}
	keep, _, next = page(items, id, admin.MQTTQuery{Limit: 1})
	if fmt.Sprint(keep) != "[a]" || next != "a" {
		t.Fatalf("limit 1: %v next %q", keep, next)
	}
}
