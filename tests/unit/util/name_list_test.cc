// The one list parser (util/name_list.h): each syntax the knobs use, and, for
// each knob, the same answers as the hand-written parser it replaced (copied
// below as it was) on every string of a generated corpus.
#include <gtest/gtest.h>
#include <strings.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/util/debug.h"
#include "common/util/name_list.h"
#include "common/util/socket_address.h"
#include "net/ib/hca_list.h"

using namespace uniccl;

namespace {

NameListSyntax trimmed(const char* chars) {
  NameListSyntax s;
  s.trim = chars;
  return s;
}

NameListSyntax withExactMark() {
  NameListSyntax s;
  s.exactMark = true;
  return s;
}

std::vector<std::string> items(const char* text, const NameListSyntax& syntax) {
  return parseNameList(text, syntax).items;
}

using Items = std::vector<std::string>;

}  // namespace

TEST(NameList, ItemsInOrderEmptyOnesDropped) {
  EXPECT_EQ(items("a,b,c", {}), (Items{"a", "b", "c"}));
  EXPECT_EQ(items(",a,,b,", {}), (Items{"a", "b"}));
  EXPECT_EQ(items("", {}), Items{});
  EXPECT_EQ(items(",,,", {}), Items{});
  NameList none = parseNameList(nullptr, {});
  EXPECT_FALSE(none.exclude);
  EXPECT_TRUE(none.items.empty());
}

TEST(NameList, CaretExcludes) {
  NameList l = parseNameList("^a,b", {});
  EXPECT_TRUE(l.exclude);
  EXPECT_EQ(l.items, (Items{"a", "b"}));
  // A bare '^': exclude, nothing listed.
  l = parseNameList("^", {});
  EXPECT_TRUE(l.exclude);
  EXPECT_TRUE(l.items.empty());
  // Only a leading '^' counts.
  l = parseNameList("a,^b", {});
  EXPECT_FALSE(l.exclude);
  EXPECT_EQ(l.items, (Items{"a", "^b"}));
}

TEST(NameList, ExactMarkOnlyWhereTheKnobHasIt) {
  NameList l = parseNameList("=eth0", withExactMark());
  EXPECT_TRUE(l.exact);
  EXPECT_EQ(l.items, Items{"eth0"});
  l = parseNameList("^=eth0", withExactMark());
  EXPECT_TRUE(l.exclude && l.exact);
  EXPECT_EQ(l.items, Items{"eth0"});
  // '=' before '^' is no mark: the '^' is then part of an item.
  l = parseNameList("=^eth0", withExactMark());
  EXPECT_TRUE(l.exact);
  EXPECT_FALSE(l.exclude);
  EXPECT_EQ(l.items, Items{"^eth0"});
  // Without exactMark '=' is text.
  l = parseNameList("=eth0", {});
  EXPECT_FALSE(l.exact);
  EXPECT_EQ(l.items, Items{"=eth0"});
}

TEST(NameList, TrimmingIsTheKnobsChoice) {
  EXPECT_EQ(items(" a , b\t", {}), (Items{" a ", " b\t"}));
  EXPECT_EQ(items(" a , b\t", trimmed(" \t")), (Items{"a", "b"}));
  EXPECT_EQ(items(" a , b\t", trimmed(" ")), (Items{"a", "b\t"}));
  EXPECT_EQ(items(" , \t ,x", trimmed(" \t")), Items{"x"});
  // Spaces before the marks: skipped only with skipLeadingSpaces.
  NameListSyntax skip = trimmed(" ");
  skip.skipLeadingSpaces = true;
  skip.exactMark = true;
  NameList l = parseNameList("  ^=mlx5_0", skip);
  EXPECT_TRUE(l.exclude && l.exact);
  EXPECT_EQ(l.items, Items{"mlx5_0"});
  l = parseNameList("  ^mlx5_0", trimmed(" "));
  EXPECT_FALSE(l.exclude);
  EXPECT_EQ(l.items, Items{"^mlx5_0"});
}

TEST(NameList, Matching) {
  NameList l = parseNameList("LL,simple", {});
  EXPECT_TRUE(l.hasIgnoringCase("Simple"));
  EXPECT_TRUE(l.hasIgnoringCase("ll"));
  EXPECT_FALSE(l.hasIgnoringCase("LL128"));
  EXPECT_FALSE(l.hasIgnoringCase("L"));

  l = parseNameList("eth,ib", withExactMark());  // prefixes
  EXPECT_TRUE(l.listed("eth0"));
  EXPECT_TRUE(l.listed("ib"));
  EXPECT_FALSE(l.listed("Eth0"));  // case matters
  EXPECT_TRUE(l.accepts("ib1"));
  EXPECT_FALSE(l.accepts("lo"));

  l = parseNameList("^=eth0", withExactMark());
  EXPECT_FALSE(l.accepts("eth0"));
  EXPECT_TRUE(l.accepts("eth01"));
  EXPECT_TRUE(parseNameList("", withExactMark()).accepts("x") == false);  // nothing listed
  EXPECT_TRUE(parseNameList("^", withExactMark()).accepts("x"));         // nothing excluded
}

// ------------------------------------------------------------------------
// The parsers this one replaced, as they were (tuning.cc's listHas for
// NCCL_PROTO, debug.cc's parseLogSubsys, socket_address.cc's
// interfaceMatches, hca_list.cc's parseHcaList, tuning.cc's parseAlgoList
// loop), compared on a corpus of generated strings.
namespace old {

bool listHas(const std::string& list, const char* name) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(start, end - start);
    if (strcasecmp(item.c_str(), name) == 0) return true;
    start = end + 1;
  }
  return false;
}

struct Proto {
  bool ll, simple, ll128Info;
  bool operator==(const Proto& o) const { return ll == o.ll && simple == o.simple && ll128Info == o.ll128Info; }
};

Proto proto(const char* p) {
  std::string s(p);
  bool exclude = !s.empty() && s[0] == '^';
  if (exclude) s = s.substr(1);
  bool ll = listHas(s, "LL"), simple = listHas(s, "Simple");
  return Proto{exclude ? !ll : ll, exclude ? !simple : simple, listHas(s, "LL128") && !exclude};
}

uint64_t subsys(const char* value) {
  static const struct {
    const char* name;
    uint64_t bit;
  } kNames[] = {{"INIT", kSubsysInit},   {"COLL", kSubsysColl},   {"P2P", kSubsysP2p},
                {"SHM", kSubsysShm},     {"NET", kSubsysNet},     {"GRAPH", kSubsysGraph},
                {"TUNING", kSubsysTune}, {"ENV", kSubsysEnv},     {"ALLOC", kSubsysAlloc},
                {"CALL", kSubsysCall},   {"PROXY", kSubsysProxy}, {"NVLS", kSubsysNvls},
                {"BOOTSTRAP", kSubsysBootstrap}, {"REG", kSubsysReg}, {"PROFILE", kSubsysProfile},
                {"ALL", kSubsysAll}};
  bool invert = value[0] == '^';
  if (invert) value++;
  uint64_t mask = 0;
  const char* p = value;
  while (*p) {
    const char* end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    while (len > 0 && (*p == ' ' || *p == '\t')) p++, len--;
    while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
    for (const auto& n : kNames)
      if (strlen(n.name) == len && strncasecmp(p, n.name, len) == 0) mask |= n.bit;
    if (!end) break;
    p = end + 1;
  }
  return invert ? ~mask : mask;
}

bool interfaceMatches(const char* spec, const char* name) {
  bool exclude = spec[0] == '^';
  if (exclude) spec++;
  bool exact = spec[0] == '=';
  if (exact) spec++;
  bool matched = false;
  const char* p = spec;
  while (*p) {
    const char* end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > 0) {
      if (exact ? (strlen(name) == len && strncmp(name, p, len) == 0) : strncmp(name, p, len) == 0) matched = true;
    }
    if (!end) break;
    p = end + 1;
  }
  return exclude ? !matched : matched;
}

// parseHcaList's split: marks, then the trimmed non-empty items.
struct Hca {
  bool exclude = false, exact = false;
  std::vector<std::string> items;
};
Hca hca(const char* spec) {
  Hca out;
  const char* p = spec;
  while (*p == ' ') p++;
  if (*p == '^') {
    out.exclude = true;
    p++;
  }
  if (*p == '=') {
    out.exact = true;
    p++;
  }
  std::string text(p);
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty()) continue;
    out.items.push_back(item);
  }
  return out;
}

// parseAlgoList's loop: the trimmed non-empty items after an optional '^'.
std::vector<std::string> algoItems(const char* value, bool* exclude) {
  std::string s(value);
  *exclude = !s.empty() && s[0] == '^';
  if (*exclude) s = s.substr(1);
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(start, end - start);
    start = end + 1;
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) continue;
    out.push_back(item);
  }
  return out;
}

}  // namespace old

namespace {

// Strings over the characters the parsers treat specially, plus names
// (whole and partial) they look for: the handwritten corpus first, then
// random ones (fixed seed).
std::vector<std::string> corpus() {
  std::vector<std::string> c = {
      "", "^", "=", "^=", "=^", " ", " ^", "  ^=x", ",", ",,", "^,", "LL", "ll", "Simple", "LL,Simple",
      "^LL", "^LL128", "LL128", "LL, Simple", " LL,Simple ", "^ LL", "INIT", "coll,p2p, NET ", "^COLL,P2P",
      "ALL", "^ALL", "\tINIT\t,ENV", "BOGUS", "eth", "ib,eth", "^docker,lo,virbr", "=eth0", "^=eth0",
      "mlx5_0:1, mlx5_1", "^=mlx5_1:2,,", " ^ mlx5", "Ring", "^tree", "ring, tree", "NVLS,Ring"};
  const char* pieces[] = {"^", "=", ",", " ", "\t", "LL", "Simple", "LL128", "INIT", "ENV", "all", "eth", "eth0",
                          "lo", "mlx5", ":1", "Ring", "tree", "x", "docker"};
  std::mt19937 rng(12345);
  for (int i = 0; i < 4000; i++) {
    std::string s;
    int n = (int)(rng() % 7);
    for (int j = 0; j < n; j++) s += pieces[rng() % (sizeof(pieces) / sizeof(pieces[0]))];
    c.push_back(s);
  }
  return c;
}

}  // namespace

TEST(NameListSameAsBefore, NcclProto) {
  for (const std::string& s : corpus()) {
    // tuning.cc's reading of NCCL_PROTO.
    const NameList l = parseNameList(s.c_str(), NameListSyntax{});
    bool ll = l.hasIgnoringCase("LL"), simple = l.hasIgnoringCase("Simple");
    old::Proto now{l.exclude ? !ll : ll, l.exclude ? !simple : simple, l.hasIgnoringCase("LL128") && !l.exclude};
    EXPECT_TRUE(now == old::proto(s.c_str())) << "'" << s << "'";
  }
}

TEST(NameListSameAsBefore, NcclDebugSubsys) {
  for (const std::string& s : corpus()) EXPECT_EQ(parseLogSubsys(s.c_str()), old::subsys(s.c_str())) << "'" << s << "'";
}

TEST(NameListSameAsBefore, NcclSocketIfname) {
  const char* names[] = {"eth0", "eth01", "eth", "lo", "docker0", "virbr0", "ib0", "x", "LL", "mlx5_0"};
  for (const std::string& s : corpus())
    for (const char* n : names)
      EXPECT_EQ(interfaceMatches(s.c_str(), n), old::interfaceMatches(s.c_str(), n)) << "'" << s << "' " << n;
}

TEST(NameListSameAsBefore, NcclIbHca) {
  NameListSyntax syntax;
  syntax.trim = " ";
  syntax.skipLeadingSpaces = true;
  syntax.exactMark = true;
  for (const std::string& s : corpus()) {
    const NameList now = parseNameList(s.c_str(), syntax);
    const old::Hca was = old::hca(s.c_str());
    EXPECT_EQ(now.exclude, was.exclude) << "'" << s << "'";
    EXPECT_EQ(now.exact, was.exact) << "'" << s << "'";
    EXPECT_EQ(now.items, was.items) << "'" << s << "'";
  }
  // And parseHcaList itself, on lists it accepts.
  ib::HcaFilter f;
  ASSERT_EQ(ib::parseHcaList("  ^=mlx5_0:1 , mlx5_1 ,", &f), ncclSuccess);
  EXPECT_TRUE(f.exclude);
  EXPECT_TRUE(f.exact);
  ASSERT_EQ(f.entries.size(), 2u);
  EXPECT_EQ(f.entries[0].name, "mlx5_0");
  EXPECT_EQ(f.entries[0].port, 1);
  EXPECT_EQ(f.entries[1].name, "mlx5_1");
  EXPECT_EQ(f.entries[1].port, -1);
}

TEST(NameListSameAsBefore, NcclAlgo) {
  for (const std::string& s : corpus()) {
    if (s.find_first_of(":;") != std::string::npos) continue;  // refused before any list parsing
    NameListSyntax syntax;
    syntax.trim = " \t";
    const NameList now = parseNameList(s.c_str(), syntax);
    bool exclude = false;
    const std::vector<std::string> was = old::algoItems(s.c_str(), &exclude);
    EXPECT_EQ(now.exclude, exclude) << "'" << s << "'";
    EXPECT_EQ(now.items, was) << "'" << s << "'";
  }
  // parseAlgoList itself: tests/unit/core/algo_list_test.cc.
}
