// NCCL's list syntax, parsed in one place for every knob that takes a list
// (NCCL_DEBUG_SUBSYS, NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_PROTO, NCCL_ALGO):
//
//   [^][=]item,item,...
//
// A leading '^' excludes the listed names instead of selecting them; where
// the knob allows it, a '=' after it makes the names exact (otherwise they
// are prefixes, for the knobs that match by prefix). Empty items are dropped.
// The knobs differ in small ways NCCL users rely on (spaces around items,
// case), so each passes its syntax; what an item means stays with the knob
// (a subsystem name, an interface prefix, "mlx5_0:1").
#pragma once

#include <string>
#include <vector>

namespace uniccl {

struct NameListSyntax {
  const char* trim = "";           // characters dropped at both ends of every item
  bool skipLeadingSpaces = false;  // spaces before the '^' / '=' marks are skipped
  bool exactMark = false;          // a '=' after the optional '^' is read as the exact mark
};

struct NameList {
  bool exclude = false;            // '^'
  bool exact = false;              // '=' (only with NameListSyntax::exactMark)
  std::vector<std::string> items;  // non-empty items, in order

  // Some item equals `name`, ignoring case.
  bool hasIgnoringCase(const char* name) const;
  // Some item names `name`: equal when exact, else a prefix of it (case matters).
  bool listed(const char* name) const;
  // listed(), turned around by '^': whether `name` passes the list.
  bool accepts(const char* name) const { return exclude != listed(name); }
};

// text == nullptr gives an empty list.
NameList parseNameList(const char* text, const NameListSyntax& syntax);

}  // namespace uniccl
