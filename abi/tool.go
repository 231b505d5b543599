package abi

import "unicode/utf8"

// A tool's file names are bytes (POSIX): one that is not UTF-8 cannot be a
// CBOR text string, which decoders refuse, and dropping or replacing its bad
// bytes would lose the name. So a ToolFile's path is encoded as a text
// string when it is valid UTF-8 and as a byte string holding its bytes
// otherwise (abi/SPEC.md 9.13). One name has one encoding: a byte string
// that holds valid UTF-8 is not canonical.

// toolFileWire is ToolFile as it is encoded.
type toolFileWire struct {
	Path     fileName `cbor:"path"`
	Size     uint64   `cbor:"size"`
	SHA256   []byte   `cbor:"sha256,omitempty"`
	Unhashed string   `cbor:"unhashed,omitempty"`
}

// MarshalCBOR encodes f with its path as text or, when it is not UTF-8, as
// bytes.
func (f ToolFile) MarshalCBOR() ([]byte, error) {
	return encMode.Marshal(toolFileWire{Path: fileName(f.Path), Size: f.Size, SHA256: f.SHA256, Unhashed: f.Unhashed})
}

// UnmarshalCBOR decodes a tool file whose path is a text or a byte string.
func (f *ToolFile) UnmarshalCBOR(data []byte) error {
	var w toolFileWire
	if err := decMode.Unmarshal(data, &w); err != nil {
		return err
	}
	*f = ToolFile{Path: string(w.Path), Size: w.Size, SHA256: w.SHA256, Unhashed: w.Unhashed}
	return nil
}

// fileName is a name that is text when it can be.
type fileName string

func (n fileName) MarshalCBOR() ([]byte, error) {
	if utf8.ValidString(string(n)) {
		return encMode.Marshal(string(n))
	}
	return encMode.Marshal([]byte(n))
}

func (n *fileName) UnmarshalCBOR(data []byte) error {
	if len(data) > 0 && data[0]>>5 == 2 { // a byte string
		var b []byte
		if err := decMode.Unmarshal(data, &b); err != nil {
			return err
		}
		// A valid UTF-8 name in a byte string decodes, and the canonical
		// check of Unmarshal refuses it (it re-encodes as text).
		*n = fileName(b)
		return nil
	}
	var s string
	if err := decMode.Unmarshal(data, &s); err != nil {
		return err
	}
	*n = fileName(s)
	return nil
}
