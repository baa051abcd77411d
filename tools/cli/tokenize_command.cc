// `tessera tokenize MODEL TEXT`: the ids the model's tokenizer produces for TEXT.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/safetensors/model_file.h"
#include "common/tokenizer/tokenizer.h"
#include "tools/cli/commands.h"

namespace tessera::cli {

absl::Status RunTokenize(const TokenizeOptions& options) {
  auto file = safetensors::OpenModelFile(options.model_path, util::FileLoad::kMap,
                                         safetensors::ModelContents::kMetadataOnly);
  if (!file.ok()) return file.status();
  auto tok = tokenizer::Tokenizer::FromGguf(**file);
  if (!tok.ok()) {
    return absl::Status(tok.status().code(),
                        absl::StrCat(options.model_path, ": ", tok.status().message()));
  }
  tokenizer::EncodeOptions encode_options{.add_special = options.add_special,
                                          .parse_special = options.parse_special};
  std::vector<tokenizer::TokenId> ids = (*tok)->Encode(options.text, encode_options);
  if (!options.show_pieces) {
    std::printf("%s\n", absl::StrJoin(ids, " ").c_str());
    return absl::OkStatus();
  }
  for (tokenizer::TokenId id : ids) {
    std::printf("%d\t%s\n", id, std::string((*tok)->TokenText(id)).c_str());
  }
  return absl::OkStatus();
}

}  // namespace tessera::cli
