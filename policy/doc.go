// Package policy decides whether a call that passed the capability check may
// run, with Cedar policies (github.com/cedar-policy/cedar-go), and applies
// the permission modes a person sets for convenience.
//
// A decision is made in this order, and each step can only narrow:
//
//  1. The request is checked against the schema (schema.cedarschema): a
//     known action, principal and resource present among the request's
//     entities, entities and context of the declared types, a Host
//     resource in canonical form (CanonicalizeHosts). Anything else
//     denies; the decision names the request as the cause.
//  2. The platform set (platform.cedar, embedded) is evaluated. A forbid
//     that matches, no permit that matches, or any policy that errors
//     denies.
//  3. The customer set, when the engine has one, is evaluated the same way.
//     A customer permit therefore never lets through what the platform
//     denies, and a customer policy that errors (a forbid whose condition
//     overflows, say) denies instead of being skipped as Cedar alone would.
//  4. Permission modes (Modes.Apply) then turn an allow into ask or deny
//     where a rule says so; they never turn a deny into an allow.
//
// The platform set's address rules are also a Go table (PlatformRanges,
// DeniedAddress) that the host's http dialer applies to every address it
// connects to; a test holds the two to the same decisions.
//
// Policy ids are the @id("...") annotation of a policy when it has one, else
// the name of its source file and its index in that file, "file.cedar#0".
// In a Decision they are qualified by their set, "platform:ID" or
// "customer:ID", so the two sets never share a name.
//
// This package must never import the host: the host imports it, and so will
// the edge runtime, which runs the same parity fixtures (testdata/parity).
package policy
