#include "report/html.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <numeric>

namespace shardc::report {

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char character : text) {
    switch (character) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += character;
    }
  }
  return out;
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (char character : text) {
    const auto byte = static_cast<unsigned char>(character);
    if (character == '"' || character == '\\') {
      out += '\\';
      out += character;
    } else if (byte < 0x20 || character == '<' || character == '>' || character == '&') {
      std::array<char, 8> buf{};
      std::snprintf(buf.data(), buf.size(), "\\u%04x", static_cast<unsigned>(byte));
      out += buf.data();
    } else {
      out += character;
    }
  }
  return out + "\"";
}

std::string shape_text(const Shape& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::vector<std::size_t> largest_first(std::size_t count, std::size_t shown,
                                       const std::function<std::int64_t(std::size_t)>& bytes_of) {
  std::vector<std::size_t> order(count);
  std::iota(order.begin(), order.end(), std::size_t{0});
  const std::size_t kept = std::min(shown, count);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept), order.end(),
                    [&](std::size_t left, std::size_t right) {
                      const std::int64_t left_bytes = bytes_of(left);
                      const std::int64_t right_bytes = bytes_of(right);
                      return left_bytes != right_bytes ? left_bytes > right_bytes : left < right;
                    });
  order.resize(kept);
  return order;
}

std::string stage_colour(int stage) {
  // Golden-angle hues, light: neighbouring stages differ, black text keeps 4.5:1 contrast.
  const int hue = static_cast<int>((static_cast<std::int64_t>(stage) * 137 + 200) % 360);
  return "hsl(" + std::to_string(hue) + ",70%,78%)";
}

namespace {

constexpr const char* kStyle = R"(
body{font:14px/1.45 system-ui,sans-serif;color:#1a1a1a;background:#fff;margin:0 auto;max-width:1280px;padding:0 16px 40px}
h1{font-size:22px;margin:18px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ccc}
h3{font-size:15px;margin:16px 0 6px}
table{border-collapse:collapse;margin:6px 0}th,td{border:1px solid #ccc;padding:2px 8px;text-align:left;vertical-align:top}
th{background:#eee}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
caption{text-align:left;font-weight:600;padding:4px 0}
code,pre,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
pre{background:#f6f6f6;border:1px solid #ddd;padding:8px;overflow:auto;max-height:420px}
.scroll{overflow:auto;max-width:100%}
.legend span{display:inline-block;margin-right:14px}.sw{display:inline-block;width:12px;height:12px;border:1px solid #555;vertical-align:middle;margin-right:4px}
.diag{border-left:4px solid #b00020;padding:4px 10px;margin:8px 0;background:#fff5f5}
.diag.warning{border-color:#8a5a00;background:#fffaf0}.diag.note{border-color:#245;background:#f4f8ff}
.meta{color:#444}svg text{font:11px system-ui,sans-serif;fill:#1a1a1a}
.grid rect.cell{cursor:pointer}
)";

constexpr const char* kScript = R"(
(function(){
var d=JSON.parse(document.getElementById('report-data').textContent);
if(!d.world)return;
var rc=d.rank_class,input=document.getElementById('rank-input'),out=document.getElementById('rank-summary');
function gib(b){return (b/1073741824).toFixed(2)+' GiB';}
function coords(mesh,r){var c=[],i;for(i=mesh.length-1;i>=0;i--){c.unshift(mesh[i][0]+'='+(r%mesh[i][1]));r=Math.floor(r/mesh[i][1]);}return c.join(' ');}
function select(r){
 if(!(r>=0&&r<d.world))return;
 input.value=r;
 var k=d.classes[rc[r]],t=document.getElementById('rank-memory');
 var text='rank '+r+' · stage '+k.stage+' · '+coords(d.dense,r)+(d.expert?' | '+coords(d.expert,r):'');
 out.textContent=text;out.setAttribute('data-rank',r);
 t.innerHTML='';
 d.kinds.forEach(function(name,i){var tr=t.insertRow();tr.insertCell().textContent=name;var c=tr.insertCell();c.className='num';c.textContent=gib(k.bytes[i]);c.setAttribute('data-bytes',k.bytes[i]);c.setAttribute('data-kind',name);});
 var tr=t.insertRow();tr.insertCell().textContent='total';var c=tr.insertCell();c.className='num';c.textContent=gib(k.total);c.setAttribute('data-bytes',k.total);c.setAttribute('data-kind','total');
 document.querySelectorAll('.rank-detail').forEach(function(e){e.hidden=e.getAttribute('data-rank')!=String(r);});
 var none=document.getElementById('rank-no-detail');none.hidden=!!document.querySelector('.rank-detail[data-rank="'+r+'"]');
 document.querySelectorAll('.grid').forEach(function(g){var cols=+g.getAttribute('data-cols'),cs=+g.getAttribute('data-cell'),h=g.querySelector('.sel');h.setAttribute('x',(r%cols)*cs);h.setAttribute('y',Math.floor(r/cols)*cs);h.setAttribute('visibility','visible');});
}
document.querySelectorAll('.grid').forEach(function(g){g.addEventListener('click',function(e){var cols=+g.getAttribute('data-cols'),cs=+g.getAttribute('data-cell'),b=g.getBoundingClientRect(),x=Math.floor((e.clientX-b.left)/cs),y=Math.floor((e.clientY-b.top)/cs);if(x<cols)select(y*cols+x);});});
input.addEventListener('change',function(){select(parseInt(input.value,10));});
window.shardcSelectRank=select;
select(d.initial_rank);
})();
)";

}  // namespace

std::string page_head(std::string_view title) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
         "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n<title>" +
         escape(title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<main>\n";
}

std::string page_tail() {
  return std::string("</main>\n<script>") + kScript + "</script>\n</body>\n</html>\n";
}

}  // namespace shardc::report
