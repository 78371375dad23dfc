#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "templates/TemplateSpec.hpp"

namespace airlock::templates {

// A recipe as POST /v1/templates takes it: Error(bad_request) naming the
// field for anything malformed or unknown. With `dockerfile`, only the
// fields a Dockerfile does not give (name, tag, resources, the build's
// sandbox settings, the ready check).
TemplateSpec parseTemplateSpec(const nlohmann::json& j);
void requireDockerfileCompanion(const nlohmann::json& j);

// A template's name and tag as creates name it: "name" or "name:tag".
struct TemplateRef {
    std::string name;
    std::string tag = "latest";
};
TemplateRef parseTemplateRef(const std::string& ref);  // Error(bad_request)
bool isValidTemplateName(const std::string& name);
bool isValidTemplateTag(const std::string& tag);
// A package as a package step names it: a name and a version, never an
// option or a shell word.
bool isPackageName(std::string_view s);

// A step in one canonical JSON form: what the layer cache keys it by, what
// the build record and the log show.
nlohmann::json stepJson(const Step& s);
nlohmann::json specJson(const TemplateSpec& s);
// A step as the log names it ("RUN echo hi", "COPY app/ /srv/app").
std::string stepText(const Step& s);
// Whether a step changes the guest (a layer) or only the build's state.
bool changesDisk(const Step& s);
ReadyCheck parseReadyCheck(const nlohmann::json& j);

}  // namespace airlock::templates
