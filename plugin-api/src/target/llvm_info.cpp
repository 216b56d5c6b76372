// llvm_info.cpp: LLVM's own view of triples, CPUs and features, through MCSubtargetInfo.
// See llvm_info.h for why this one file is C++. No exceptions, no RTTI, nothing printed.
#include "llvm_info.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <llvm-c/Target.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/TargetParser/Triple.h>
#pragma GCC diagnostic pop

namespace {

void init_targets()
{
    // A function-local static is initialised once, thread-safely.
    static const bool done = [] {
        LLVMInitializeAllTargetInfos();
        LLVMInitializeAllTargetMCs();
        return true;
    }();
    (void)done;
}

const llvm::Target *lookup(const char *triple)
{
    init_targets();
    if (!triple || !*triple)
        return nullptr;
    std::string err;
    return llvm::TargetRegistry::lookupTarget(llvm::Triple::normalize(triple), err);
}

// A subtarget for triple + cpu + features; cpu and features must already be known to LLVM
// (otherwise LLVM would print a warning), which every caller checks first.
std::unique_ptr<llvm::MCSubtargetInfo> subtarget(const char *triple, const char *cpu,
                                                 const char *features)
{
    const llvm::Target *t = lookup(triple);
    if (!t)
        return nullptr;
    return std::unique_ptr<llvm::MCSubtargetInfo>(t->createMCSubtargetInfo(
        llvm::Triple::normalize(triple), cpu ? cpu : "", features ? features : ""));
}

const llvm::SubtargetFeatureKV *find_feature(const llvm::MCSubtargetInfo &sti, llvm::StringRef name)
{
    for (const llvm::SubtargetFeatureKV &kv : sti.getAllProcessorFeatures())
        if (name == kv.Key)
            return &kv;
    return nullptr;
}

char *dup(const std::string &s)
{
    char *p = static_cast<char *>(std::malloc(s.size() + 1));
    if (p)
        std::memcpy(p, s.c_str(), s.size() + 1);
    return p;
}

} // namespace

extern "C" {

int tth__llvm_triple_known(const char *triple)
{
    return lookup(triple) != nullptr;
}

int tth__llvm_cpu_known(const char *triple, const char *cpu)
{
    if (!cpu || !*cpu)
        return 0;
    auto sti = subtarget(triple, "", "");
    return sti && sti->isCPUStringValid(cpu);
}

int tth__llvm_feature_known(const char *triple, const char *feature)
{
    if (!feature || !*feature)
        return 0;
    auto sti = subtarget(triple, "", "");
    return sti && find_feature(*sti, feature) != nullptr;
}

char **tth__llvm_names(const char *triple, int what, size_t *n)
{
    auto sti = subtarget(triple, "", "");
    if (!sti)
        return nullptr;
    std::vector<std::string> names;
    if (what == 0)
        for (const llvm::SubtargetSubTypeKV &kv : sti->getAllProcessorDescriptions())
            names.emplace_back(kv.Key);
    else
        for (const llvm::SubtargetFeatureKV &kv : sti->getAllProcessorFeatures())
            names.emplace_back(kv.Key);
    std::sort(names.begin(), names.end());
    char **v = static_cast<char **>(std::calloc(names.size() + 1, sizeof(char *)));
    if (!v)
        return nullptr;
    for (size_t i = 0; i < names.size(); i++) {
        if (!(v[i] = dup(names[i]))) {
            tth__strv_free(v);
            return nullptr;
        }
    }
    if (n)
        *n = names.size();
    return v;
}

void tth__strv_free(char **v)
{
    if (!v)
        return;
    for (size_t i = 0; v[i]; i++)
        std::free(v[i]);
    std::free(v);
}

int tth__llvm_features_enabled(const char *triple, const char *cpu, const char *features,
                               const char *const *names, size_t n, int *enabled)
{
    auto sti = subtarget(triple, cpu, features);
    if (!sti)
        return -1;
    const llvm::FeatureBitset &bits = sti->getFeatureBits();
    for (size_t i = 0; i < n; i++) {
        const llvm::SubtargetFeatureKV *kv = find_feature(*sti, names[i]);
        enabled[i] = kv && bits[kv->Value];
    }
    return 0;
}

char *tth__llvm_feature_diff(const char *triple, const char *cpu, const char *features)
{
    auto sti = subtarget(triple, cpu, "");
    if (!sti)
        return nullptr;
    const llvm::FeatureBitset &bits = sti->getFeatureBits();
    std::vector<std::string> out;
    llvm::StringRef rest(features ? features : "");
    while (!rest.empty()) {
        auto [item, tail] = rest.split(',');
        rest = tail;
        if (item.size() < 2 || (item[0] != '+' && item[0] != '-'))
            continue;
        const llvm::SubtargetFeatureKV *kv = find_feature(*sti, item.drop_front());
        if (!kv)
            continue;
        bool on = item[0] == '+';
        if (bits[kv->Value] != on)
            out.emplace_back(item.str());
    }
    std::sort(out.begin(), out.end(), [](const std::string &a, const std::string &b) {
        return a.substr(1) < b.substr(1);
    });
    std::string joined;
    for (size_t i = 0; i < out.size(); i++) {
        if (i)
            joined += ',';
        joined += out[i];
    }
    return dup(joined);
}

} // extern "C"
