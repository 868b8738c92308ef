const {
  DynamoDBClient, CreateTableCommand, PutItemCommand, GetItemCommand,
} = require("@aws-sdk/client-dynamodb");
const { startLocalTtl } = require("./local-ttl");

const endpoint = process.env.DYNAMODB_ENDPOINT || "http://127.0.0.1:8000";
const table = `sessions-jest-${Date.now()}`;
const client = new DynamoDBClient({
  endpoint,
  region: "us-east-1",
  credentials: { accessKeyId: "local", secretAccessKey: "local" },
});
const now = () => Math.floor(Date.now() / 1000);
const put = (id, ttl) =>
  client.send(new PutItemCommand({ TableName: table, Item: { id: { S: id }, ttl: { N: String(ttl) } } }));
const present = async (id) =>
  (await client.send(new GetItemCommand({ TableName: table, Key: { id: { S: id } }, ConsistentRead: true }))).Item !== undefined;

let ttl;
beforeAll(async () => {
  ttl = startLocalTtl({ endpoint, table });
  await client.send(new CreateTableCommand({
    TableName: table,
    AttributeDefinitions: [{ AttributeName: "id", AttributeType: "S" }],
    KeySchema: [{ AttributeName: "id", KeyType: "HASH" }],
    BillingMode: "PAY_PER_REQUEST",
  }));
});
afterAll(() => ttl.stop());

test("an item is gone soon after its ttl", async () => {
  await put("soon", now() + 1);
  expect(await present("soon")).toBe(true);
  const deadline = Date.now() + 10_000;
  while ((await present("soon")) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
  }
  expect(await present("soon")).toBe(false);
});

test("the suite's clock moves forward an hour", async () => {
  const start = now();
  await put("in-an-hour", start + 3600);
  await put("tomorrow", start + 86400);
  ttl.expireAsOf(start + 3601);
  expect(await present("in-an-hour")).toBe(false);
  expect(await present("tomorrow")).toBe(true);
});
