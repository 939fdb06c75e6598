package amqp

import (
	"errors"
	"testing"
	"time"
)

func TestDefaultOptionsValid(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if got := (Options{}).withDefaults(); got.FrameMax != DefaultOptions().FrameMax || got.Heartbeat != DefaultOptions().Heartbeat {
		t.Fatalf("zero options did not take the defaults: %+v", got)
	}
}

func TestOptionsValidateRejects(t *testing.T) {
	for name, o := range map[string]Options{
		"frame max":   {FrameMax: 100},
		"heartbeat":   {Heartbeat: time.Millisecond},
		"msg size":    {MaxMessageSize: -1},
		"queue bytes": {MaxQueueBytes: -1},
		"vhost":       {VirtualHosts: []string{""}},
	} {
		if err := o.Validate(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: Validate = %v, want ErrInvalidOptions", name, err)
		}
		if _, err := NewServer(o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: NewServer = %v, want ErrInvalidOptions", name, err)
		}
	}
}
