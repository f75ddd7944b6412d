#include "common/util/name_list.h"

#include <strings.h>

#include <cstring>

namespace uniccl {

NameList parseNameList(const char* text, const NameListSyntax& syntax) {
  NameList out;
  if (text == nullptr) return out;
  const char* p = text;
  if (syntax.skipLeadingSpaces)
    while (*p == ' ') p++;
  if (*p == '^') {
    out.exclude = true;
    p++;
  }
  if (syntax.exactMark && *p == '=') {
    out.exact = true;
    p++;
  }
  const char* trim = syntax.trim ? syntax.trim : "";
  while (true) {
    const char* end = strchr(p, ',');
    const char* stop = end ? end : p + strlen(p);
    const char* b = p;
    while (b < stop && *b != '\0' && strchr(trim, *b) != nullptr) b++;
    const char* e = stop;
    while (e > b && strchr(trim, e[-1]) != nullptr) e--;
    if (e > b) out.items.emplace_back(b, (size_t)(e - b));
    if (!end) break;
    p = end + 1;
  }
  return out;
}

bool NameList::hasIgnoringCase(const char* name) const {
  for (const std::string& item : items)
    if (strcasecmp(item.c_str(), name) == 0) return true;
  return false;
}

bool NameList::listed(const char* name) const {
  for (const std::string& item : items) {
    if (exact ? item == name : strncmp(name, item.c_str(), item.size()) == 0) return true;
  }
  return false;
}

}  // namespace uniccl
