// A local Discord for trying benefit delivery without a Discord server: the tests'
// stand-in (test/support/discord-server.ts: every request checked against Discord's
// OpenAPI) on 127.0.0.1:3990, holding the demo catalog's server (guild
// 100000000000000001), its roles and channel, and one member. `npm run discord:stand-in`;
// start the service with the two lines it prints (README, "Discord access from a
// checkout"). Not for production: it keeps everything in memory.
import { startDiscordServer } from '../test/support/discord-server';

async function main() {
  const port = Number(process.env.PORT ?? 3990);
  const token = process.env.DISCORD_BOT_TOKEN ?? 'stand-in.bot-token.for-the-demo-catalog';
  const discord = await startDiscordServer({ token, port });
  const guild = discord.addGuild({
    id: '100000000000000001', name: 'Demo Discord server', botRolePosition: 10,
    roles: [{ id: '200000000000000001', name: 'Members chat', position: 2 }, { id: '200000000000000002', name: 'VIP chat', position: 3 }],
  });
  discord.addChannel(guild.id, '300000000000000001');
  const member = discord.addMember(guild.id, { id: '400000000000000001', username: 'demo-member' });
  process.stdout.write(`DISCORD_API_URL=${discord.url} DISCORD_BOT_TOKEN=${token}\n`);
  process.stdout.write(`member in the server: ${member.userId} (${member.username})\n`);
  const stop = () => { void discord.close().then(() => process.exit(0)); };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
