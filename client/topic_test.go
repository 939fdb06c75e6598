package client

import (
	"errors"
	"strings"
	"testing"
)

// A consumer group name is refused before any broker sees it when no
// broker could take it (the topic rule: over 127 characters, or a
// character outside it). One of 121-127 characters goes to the brokers,
// which serve it when they already keep it (TestPushConsumerKeptLongGroup).
func TestClientConsumerGroupNameLength(t *testing.T) {
	opts := ConsumerOptions{ClientOptions: ClientOptions{Registries: []string{"127.0.0.1:9876"}}}
	for _, c := range []struct {
		group string
		ok    bool
	}{
		{strings.Repeat("g", MaxGroupLength), true},
		{strings.Repeat("g", MaxGroupLength+1), true},
		{strings.Repeat("g", MaxTopicLength), true},
		{strings.Repeat("g", MaxTopicLength+1), false},
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
