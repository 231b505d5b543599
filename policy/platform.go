package policy

import _ "embed"

// PlatformFile is the name the embedded platform defaults are loaded under.
const PlatformFile = "platform.cedar"

//go:embed platform.cedar
var platformText []byte
