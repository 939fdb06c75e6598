package statestore

import (
	"errors"
	"testing"
)

func TestStateStoreClientOptions(t *testing.T) {
	if err := (&Options{}).Validate(); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("empty options: %v", err)
	}
	if got := string(hexDecode("6B31")); got != "k1" {
		t.Fatalf("hexDecode %q", got)
	}
	if hexDecode("6") != nil || hexDecode("ZZ") != nil {
		t.Fatal("bad hex accepted")
	}
}
