-- ranktune: read a Redis cache's hashes in one round trip (see docs/cache.md).
-- KEYS: the hashes to read (meta, envs, then sections). ARGV[1]: the most
-- bytes one value may have (a longer one comes back as its length, an
-- integer, and is skipped by the reader); ARGV[2]: the most bytes in all;
-- ARGV[3]: the most fields one hash may have; ARGV[4]: the bytes each
-- field counts beyond its text (what holding it costs, so a million empty
-- fields are not free).
-- A key that is not a hash comes back as its type name (a status reply).
-- Every bound is checked on the server before the reply is built: a hash
-- with too many fields is refused by its HLEN, and fields are gathered
-- with HSCAN so an oversized hash is refused after one batch past the
-- cap, never built whole.
local maxv, maxt = tonumber(ARGV[1]), tonumber(ARGV[2])
local maxf, per = tonumber(ARGV[3]), tonumber(ARGV[4])
local total = 0
local out = {}
for k = 1, #KEYS do
  local t = redis.call('TYPE', KEYS[k])['ok']
  if t == 'none' then
    out[k] = {}
  elseif t ~= 'hash' then
    out[k] = {ok = t}
  else
    local n = redis.call('HLEN', KEYS[k])
    if n > maxf then
      return redis.error_reply('RANKTUNE_TOO_MANY ' .. KEYS[k] .. ' ' .. n)
    end
    if total + n * per > maxt then
      return redis.error_reply('RANKTUNE_TOO_BIG ' .. KEYS[k] .. ' ' .. (total + n * per))
    end
    local flat = {}
    local cursor = '0'
    repeat
      local r = redis.call('HSCAN', KEYS[k], cursor, 'COUNT', 512)
      cursor = r[1]
      local batch = r[2]
      for j = 2, #batch, 2 do
        local len = #batch[j]
        total = total + #batch[j - 1] + per
        flat[#flat + 1] = batch[j - 1]
        if len > maxv then
          flat[#flat + 1] = len
        else
          total = total + len
          flat[#flat + 1] = batch[j]
        end
      end
      if total > maxt then
        return redis.error_reply('RANKTUNE_TOO_BIG ' .. KEYS[k] .. ' ' .. total)
      end
    until cursor == '0'
    out[k] = flat
  end
end
return out
