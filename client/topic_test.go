package client

import (
	"errors"
	"strings"
	"testing"
)

// A consumer group name is refused before any broker sees it when its
// retry topic, %RETRY%<group>, could not exist (over 120 characters).
func TestClientConsumerGroupNameLength(t *testing.T) {
	opts := ConsumerOptions{ClientOptions: ClientOptions{Registries: []string{"127.0.0.1:9876"}}}
	for _, c := range []struct {
		group string
		ok    bool
	}{
		{strings.Repeat("g", MaxGroupLength), true},
		{strings.Repeat("g", MaxGroupLength+1), false},
		{"has space", false},
	} {
		o := opts
		o.Group = c.group
		err := o.Validate()
		if c.ok != (err == nil) || err != nil && !errors.Is(err, ErrBadOptions) {
			t.Errorf("group of %d characters: %v", len(c.group), err)
		}
	}
}
