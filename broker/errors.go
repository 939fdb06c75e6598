package broker

import (
	"errors"
	"fmt"
)

// Errors of the broker package. Callers test them with errors.Is; the
// remoting layer maps them to RocketMQ response codes.
var (
	// ErrInvalidTopic: a topic name breaks the naming rules (characters
	// [%|a-zA-Z0-9_-], 1 to 127 bytes) or is reserved.
	ErrInvalidTopic = errors.New("broker: invalid topic name")
	// ErrTopicNotExist: the topic is unknown and may not be auto-created.
	ErrTopicNotExist = errors.New("broker: topic does not exist")
	// ErrInvalidGroup: a group name breaks the naming rules.
	ErrInvalidGroup = errors.New("broker: invalid group name")
	// ErrGroupNotExist: the subscription group is unknown and may not be
	// auto-created.
	ErrGroupNotExist = errors.New("broker: subscription group does not exist")
	// ErrGroupLimit: an unknown subscription group was not created on
	// first use because the broker holds as many groups as
	// Options.MaxAutoCreatedGroups allows. It wraps ErrGroupNotExist.
	ErrGroupLimit = fmt.Errorf("%w: auto-creation limit reached", ErrGroupNotExist)
	// ErrCorruptConfig: a metadata file under <store root>/config is not
	// valid JSON of its kind; the broker refuses to start rather than
	// forget topics or offsets.
	ErrCorruptConfig = errors.New("broker: corrupt config file")
)
