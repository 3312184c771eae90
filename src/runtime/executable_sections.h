// The text sections an Executable writes into its artifact besides its target's and its kernels'
// (executable.cpp): the options that shaped the code, the source the module was read from, and
// the checks a load makes of the meta and the run-time sizes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/artifact.h"
#include "runtime/executable.h"

namespace kiln::runtime {

// The options that shape the generated code, as text (artifact meta, cache keys), and back.
std::string optionsText(const CompileOptions& o);
Status parseOptionsText(const std::string& text, CompileOptions& o);

// The "source" section: a line each for "format", "path" and "key" ("" without a path).
std::string sourceText(const ModuleSource& s);
ModuleSource parseSourceText(const std::vector<std::string>& lines);

// The target an artifact's meta lines name, if they are this Kiln's and for this machine;
// errors name `source` and say to compile again.
StatusOr<const Target*> artifactTarget(std::map<std::string, std::string>& meta,
                                       const std::string& source);

// The artifact's run-time sizes ("dynamic"), checked against its output names and its module's
// `numOutputs` outputs.
StatusOr<std::vector<DynamicDim>> storedRunTimeSizes(const DecodedArtifact& s,
                                                     const std::vector<std::string>& outputNames,
                                                     size_t numOutputs, const std::string& source);

}  // namespace kiln::runtime
