package client

import (
	"fmt"
	"unicode/utf8"
)

// MaxTopicLength is the longest topic name brokers accept.
const MaxTopicLength = 127

// MaxGroupLength is the longest consumer group name brokers accept: the
// group's retry topic, %RETRY%<group>, must be a valid topic name.
const MaxGroupLength = MaxTopicLength - len("%RETRY%")

// ValidateGroup checks a consumer group name against the brokers' rule:
// 1 to MaxGroupLength (120) characters of [%|a-zA-Z0-9_-]. The error wraps
// ErrBadOptions.
func ValidateGroup(group string) error {
	if err := ValidateTopic(group); err != nil || len(group) > MaxGroupLength {
		return fmt.Errorf("%w: group name %q: want 1 to %d characters of [%%|a-zA-Z0-9_-]", ErrBadOptions, group, MaxGroupLength)
	}
	return nil
}

// ValidateTopic checks a topic name against the brokers' rule (RocketMQ's):
// 1 to 127 characters of [%|a-zA-Z0-9_-]. The error wraps ErrBadOptions.
func ValidateTopic(topic string) error {
	if topic == "" {
		return fmt.Errorf("%w: empty topic name", ErrBadOptions)
	}
	if len(topic) > MaxTopicLength {
		return fmt.Errorf("%w: topic name %q is %d bytes, at most %d", ErrBadOptions, topic, len(topic), MaxTopicLength)
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '%' || c == '|' || c == '_' || c == '-') {
			_, n := utf8.DecodeRuneInString(topic[i:]) // name the character, not its first byte
			return fmt.Errorf("%w: topic name %q has %q at byte %d; allowed are [%%|a-zA-Z0-9_-]", ErrBadOptions, topic, topic[i:i+n], i)
		}
	}
	return nil
}
